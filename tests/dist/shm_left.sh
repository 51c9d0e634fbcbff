#!/bin/sh
# Runs a command (an mpirun of places that print "shm region: FILE" for the libfabric shm regions they map) and then
# says whether any of those files is left in /dev/shm: places that end abruptly (std::_Exit after a fatal error, or
# killed) must not leave their 16 MiB regions behind. Removes what it finds, so that a failure does not leak too.
out=$("$@" 2>&1)
echo "$out"
regions=$(echo "$out" | sed -n 's/^.*shm region: //p' | sort -u)
if [ -z "$regions" ]; then
  echo "shm_left.sh: no place named a shm region"
  exit 0
fi
left=0
for f in $regions; do
  if [ -e "$f" ]; then
    echo "shm_left.sh: left behind: $f"
    rm -f "$f"
    left=1
  fi
done
[ $left -eq 0 ] && echo "shm_left.sh: every shm region was removed"
exit 0
