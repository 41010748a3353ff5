package v1

// Hub marks v1, the storage version, as the version the others convert
// through (controller-runtime's conversion.Hub).
func (*Guestbook) Hub() {}
