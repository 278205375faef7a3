#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what is missing, builds, and compares the backends with each other
# and with fio on a scratch file (about a minute).  See bench/README.md.
exec "$(dirname "$0")/bench/run-compare.sh" "$@"
