package cache

// Store is a thread-safe map from key to object.
//
// Objects handed out by a Store are shared with every other reader: callers
// must not mutate them (copy with DeepCopy first).
type Store[T Object] interface {
	// Add inserts or replaces obj under its key.
	Add(obj T) error
	// Update is Add: it exists so that callers can say what they mean.
	Update(obj T) error
	// Delete removes the object stored under obj's key.
	Delete(obj T) error
	// List returns every stored object, in no particular order.
	List() []T
	// ListKeys returns every key, in no particular order.
	ListKeys() []string
	// Get returns the object stored under obj's key.
	Get(obj T) (item T, exists bool, err error)
	// GetByKey returns the object stored under key.
	GetByKey(key string) (item T, exists bool, err error)
	// Replace swaps the whole content for list. resourceVersion is the
	// version the list was read at; stores that do not track it ignore it.
	Replace(list []T, resourceVersion string) error
	// Resync is meaningful only for queues (DeltaFIFO); a plain store does
	// nothing.
	Resync() error
}

// IndexFunc computes the index values of an object: the keys under which an
// index files it. An object may have none, one or many.
type IndexFunc[T Object] func(obj T) ([]string, error)

// Indexers maps an index name to its IndexFunc.
type Indexers[T Object] map[string]IndexFunc[T]

// NamespaceIndex is the name of the index by metadata.namespace that every
// informer's Indexer has.
const NamespaceIndex = "namespace"

// MetaNamespaceIndexFunc indexes an object by its namespace.
func MetaNamespaceIndexFunc[T Object](obj T) ([]string, error) {
	return []string{obj.GetNamespace()}, nil
}

// Indexer is a Store with indices: secondary lookups by the values an
// IndexFunc computes.
type Indexer[T Object] interface {
	Store[T]
	// Index returns the objects that share at least one value of index
	// indexName with obj.
	Index(indexName string, obj T) ([]T, error)
	// IndexKeys returns the keys filed under value in index indexName.
	IndexKeys(indexName, value string) ([]string, error)
	// ListIndexFuncValues returns every value index indexName has an entry for.
	ListIndexFuncValues(indexName string) []string
	// ByIndex returns the objects filed under value in index indexName.
	ByIndex(indexName, value string) ([]T, error)
	// GetIndexers returns the index functions.
	GetIndexers() Indexers[T]
	// AddIndexers adds index functions and builds their indices from what is
	// already stored. A name already in use is an error.
	AddIndexers(newIndexers Indexers[T]) error
}
