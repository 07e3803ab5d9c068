#!/usr/bin/env bash
# Checks the README's run command as a newcomer meets it: a fresh clone of this repository (its committed state)
# in a temporary folder, the command's install part run verbatim there (everything before `&& python app.py`,
# read from README.md's "Set up" section, so the check follows the README), then the app imported and served
# until its /config answers. Prints how long each part took; exits non-zero on the first failure.
#
#   scripts/check_setup.sh            # ~3-4 min on 2 cores with the wheels in pip's cache (README "Set up")
#   scripts/check_setup.sh --keep     # leave the clone and its .venv for a look (the path is printed)
#   scripts/check_setup.sh --changes  # the working tree instead: uncommitted edits and new files (before a commit)
#
# Not a test: the install alone takes minutes and needs the package registries, so CI checks the README's test
# command (`.ci/run`, which makes the same venv) and this script is run by hand when the set-up changes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KEEP=0 CHANGES=0
for arg in "$@"; do
    case "$arg" in
        --keep) KEEP=1 ;;
        --changes) CHANGES=1 ;;
        *) echo "usage: scripts/check_setup.sh [--keep] [--changes]" >&2; exit 2 ;;
    esac
done
WORK="$(mktemp -d "${TMPDIR:-/tmp}/check-setup-XXXXXX")"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    if [ "$KEEP" = 1 ]; then echo "kept: $WORK/clone"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

git clone --quiet "$ROOT" "$WORK/clone"
cd "$WORK/clone"
if [ "$CHANGES" = 1 ]; then                 # the working tree as it is: edits, and new files git does not ignore
    git -C "$ROOT" diff HEAD --binary | git apply --allow-empty
    (cd "$ROOT" && git ls-files --others --exclude-standard -z | xargs -0 -r cp --parents -t "$WORK/clone")
fi
RUN_COMMAND="$(python3 - <<'EOF'
import re, pathlib
text = pathlib.Path("README.md").read_text(encoding="utf-8")
section = text[text.index("\n## Set up"):]
section = section[:section.find("\n## ", 1)]
print(re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0].strip())
EOF
)"
INSTALL="${RUN_COMMAND% && python app.py}"
if [ "$INSTALL" = "$RUN_COMMAND" ]; then
    echo "README's run command does not end in '&& python app.py': $RUN_COMMAND" >&2
    exit 1
fi
echo "install: $INSTALL"
start=$SECONDS
bash -euo pipefail -c "$INSTALL"
echo "install took $((SECONDS - start)) s"

PY="$WORK/clone/.venv/bin/python"
start=$SECONDS
"$PY" -c "import torch, gradio, app, explorer.page; print('imported: torch', torch.__version__, '(CUDA build)' if torch.version.cuda else '(CPU build)')"
echo "import took $((SECONDS - start)) s"

PORT="${CHECK_SETUP_PORT:-7871}"
start=$SECONDS
"$PY" app.py --port "$PORT" >"$WORK/app.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do                      # up to 10 min: a loaded machine starts the app slowly
    if curl -sf "http://127.0.0.1:$PORT/config" -o "$WORK/config.json"; then
        echo "served: /config answered after $((SECONDS - start)) s: $(head -c 100 "$WORK/config.json")"
        exit 0
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "python app.py exited before it served; its output:" >&2
        cat "$WORK/app.log" >&2
        exit 1
    fi
    sleep 1
done
echo "python app.py did not answer /config within 10 minutes; its output:" >&2
cat "$WORK/app.log" >&2
exit 1
