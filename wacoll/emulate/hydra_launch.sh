#!/bin/sh
# wacoll testbed: hydra's "ssh" launcher, run as  SCRIPT [options] HOST COMMAND...
# Runs COMMAND (one shell command line, as ssh would) inside the network namespace
# that WACOLL_TESTBED_HOSTS assigns to HOST, e.g.
#   WACOLL_TESTBED_HOSTS="10.78.0.2=wacoll-tb-c0 10.78.0.3=wacoll-tb-c1"
while [ $# -gt 0 ]; do
    case "$1" in
        -*) shift ;;
        *) break ;;
    esac
done
host=$1
shift
for pair in $WACOLL_TESTBED_HOSTS; do
    case "$pair" in
        "$host="*) exec ip netns exec "${pair#*=}" /bin/sh -c "$*" ;;
    esac
done
echo "wacoll testbed: no namespace for host '$host'" >&2
exit 255
