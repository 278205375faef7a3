#!/bin/sh
# Writes nginx-1.22.1-asyncfio.patch from an edited tree that build.sh made
# (OUT/asyncfio, a git repository whose first commit is the pristine source).
set -eu
tree=${1:?usage: mkpatch.sh OUT/asyncfio}
here=$(cd "$(dirname "$0")" && pwd)
cd "$tree"
git add -N src/event/ngx_event_asyncfio.c src/event/ngx_event_asyncfio.h
git diff --src-prefix=a/ --dst-prefix=b/ -- auto src > "$here/nginx-1.22.1-asyncfio.patch"
