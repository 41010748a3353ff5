# hack/lib/summary.jq: the jq definitions the benchmark scripts' summaries
# share (memory.sh, watch-fanout.sh), used as
#   jq -L "$REPO/hack/lib" 'include "summary"; ...'

# median is the middle of an array of numbers (the lower middle one of an
# even count), null for an empty array.
def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;

# med(f) is the median of f over the array's elements, nulls left out.
def med(f): [.[] | f | select(. != null)] | median;

# ratio(a; b) is a / b, null when either is missing or b is zero.
def ratio(a; b): if a == null or b == null or b == 0 then null else a / b end;
