#!/usr/bin/env bash
# terminal.sh GLIMPSE SOURCE_DIR — glimpse chat in a real terminal (a tmux pane, driven by keystrokes): the
# prompt appears, the first answer about the picture is the reference's (llava-llama-tiny case 1, greedy, 20
# tokens: a run of its ASCII text is looked for on the screen), a second message gets an answer, /image and an
# unknown command are answered on the screen, Ctrl-C at the prompt ends it with status 130, and /quit with 0.
# Skipped (77) without tmux, a pseudo-terminal or the fixtures.
set -euo pipefail
glimpse=$1 source_dir=$2
fixtures=${GLIMPSE_FIXTURES:-$source_dir/../shared/fixtures}
command -v tmux >/dev/null || { echo "tmux is not installed: skipped"; exit 77; }
# a terminal needs a pseudo-terminal: a chroot without /dev/pts has none (tmux: "fork failed: No such device")
python3 -c 'import os; [os.close(fd) for fd in os.openpty()]' 2>/dev/null ||
  { echo "no pseudo-terminal can be opened here (is /dev/pts mounted?): skipped"; exit 77; }
[ -f "$fixtures/llava-llama-tiny/expected.json" ] || { echo "no fixtures at $fixtures: skipped"; exit 77; }
# the longest run of plain ASCII in the reference's answer (the tiny model's words mix scripts a terminal may
# draw at other widths)
expected=$(python3 - "$fixtures/llava-llama-tiny/expected.json" <<'PY'
import json, re, sys
case = json.load(open(sys.argv[1]))["cases"][1]
assert case["prompt"] == "USER: <image>\nWhat color is the cup? ASSISTANT:"
runs = re.findall(r"[ -~]+", case["greedy"]["text"].strip())
print(max(runs, key=len).strip())
PY
)
socket=glimpse-chat-test-$$
tmux_() { tmux -L "$socket" "$@"; }
trap 'tmux_ kill-server 2>/dev/null || true' EXIT
screen() { tmux_ capture-pane -p -t "$session" -S -100; } # (the session run started last)
# wait_for TEXT [SECONDS] — until the pane shows TEXT (a fixed string)
wait_for() {
  local deadline=$((SECONDS + ${2:-60}))
  until screen | grep -qF -- "$1"; do
    if [ $SECONDS -ge $deadline ]; then
      echo "the terminal never showed: $1"; echo "--- screen:"; screen; exit 1
    fi
    sleep 0.2
  done
}
# wait_prompts N — until the pane has shown N prompts (a line starting with ">"; the pane drops the space)
wait_prompts() {
  local deadline=$((SECONDS + 120))
  until [ "$(screen | grep -c '^>')" -ge "$1" ]; do
    if [ $SECONDS -ge $deadline ]; then echo "prompt $1 never came"; screen; exit 1; fi
    sleep 0.2
  done
}
run() { # SESSION
  session=$1
  tmux_ new-session -d -s "$session" -x 160 -y 48 \
    "$glimpse chat -m $fixtures/llava-llama-tiny --max-tokens 20 $fixtures/images/astronaut.png; echo \"EXIT=\$?\"; sleep 60"
}

run chat
wait_prompts 1
tmux_ send-keys -t chat "What color is the cup?" Enter
wait_for "$expected"
tmux_ send-keys -t chat "/image $fixtures/images/chelsea.png" Enter
wait_for "goes with the next message"
tmux_ send-keys -t chat "/what" Enter
wait_for "commands: /image PATH, /reset, /quit"
tmux_ send-keys -t chat "And this one?" Enter
wait_prompts 5 # after the answer, /image, /what and the second answer
tmux_ send-keys -t chat "/quit" Enter
wait_for "EXIT=0"
echo "chat in a terminal: the reference's answer ($expected) and a second turn; /quit ends it with 0"

# (the new session before the old one goes: a server left without sessions exits, and a client starting
# one while it does fails with "server exited unexpectedly")
run interrupt
tmux_ kill-session -t chat
wait_prompts 1
tmux_ send-keys -t interrupt C-c
wait_for "EXIT=130"
echo "Ctrl-C at the prompt ends it with 130"
