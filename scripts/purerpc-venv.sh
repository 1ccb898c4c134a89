#!/usr/bin/env bash
# Creates purerpc's own virtual environment for benchmarks/peers/grpc_peers.py, with
# pinned versions, and prints its interpreter: the --purerpc-python to pass.
#
# purerpc 0.8.0 pins h2 < 4 (trio_h2t needs h2 >= 4), so it cannot live in the
# project's environment. Everything but the path goes to stderr, so this works:
#   .venv/bin/python benchmarks/peers/grpc_peers.py \
#       --purerpc-python "$(scripts/purerpc-venv.sh)"
set -euo pipefail

# purerpc 0.8.0 (it brings h2 3.2.0 and anyio), as in the recorded figures
# (benchmarks/methods.md, "peers/grpc_peers.py"); protobuf 7 from 7.35.1 on: grpc_peers.py compiles bench.proto
# with the project's grpcio-tools, whose generated code checks at import for a
# protobuf runtime of the same major version and at least its own (7.35.1, see
# ValidateProtobufRuntimeVersion in trio_h2t/interop/protos/*_pb2.py); trio, the
# event loop purerpc runs on here.
REQUIREMENTS=("purerpc==0.8.0" "protobuf>=7.35.1,<8" "trio")
DEFAULT_DIR=/tmp/purerpc-venv

usage() {
    cat <<USAGE
usage: scripts/purerpc-venv.sh [--dry-run] [DIR]

Create (or update) a virtual environment in DIR (default $DEFAULT_DIR) with
${REQUIREMENTS[*]}
and print DIR/bin/python, the value of grpc_peers.py's --purerpc-python.
The base interpreter is \$PYTHON (default python3).

  --dry-run   print the commands and the path; create and install nothing
  -h, --help  this text
USAGE
}

dry_run=0
dir=$DEFAULT_DIR
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --dry-run) dry_run=1 ;;
        -*) echo "purerpc-venv: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) dir=$1 ;;
    esac
    shift
done
py=${PYTHON:-python3}

run() {
    printf '+' >&2
    printf ' %q' "$@" >&2
    echo >&2
    if [ "$dry_run" = 0 ]; then
        "$@" >&2
    fi
}

if [ ! -x "$dir/bin/python" ]; then
    run "$py" -m venv "$dir"
fi
run "$dir/bin/python" -m pip install -q "${REQUIREMENTS[@]}"
if [ "$dry_run" = 0 ]; then
    "$dir/bin/python" -c "import purerpc, google.protobuf, trio" >&2
fi
echo "pass to benchmarks/peers/grpc_peers.py: --purerpc-python $dir/bin/python" >&2
echo "$dir/bin/python"
