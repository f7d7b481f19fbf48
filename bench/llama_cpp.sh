# shellcheck shell=bash disable=SC2034 # (llama_version is for the caller)
# llama_cpp.sh — sourced by the scripts that time glimpse beside llama.cpp (bench/llava_peers.sh,
# bench/encoder_peers.sh); not run on its own. llama_cpp_setup LLAMA_CPP WORK FIXTURES builds the checkout's tools
# (in LLAMA_CPP/build) and bench/clip_embed.cpp against its image encoder (WORK/clip_embed), sets llama_version (its
# git commit, or LLAMA_CPP_VERSION where the checkout has no .git), and, before anything is timed, checks
# bench/llava_gguf.py's conversion on the reference fixtures: llama.cpp must answer both LLaVA fixtures' text case
# with the reference's greedy text and give llava-llama-tiny's image features (within the float16 rounding of its
# patch convolution, which llama.cpp always stores in float16). Those features are what catches an encoder that
# puts CLIP's class token after the patches, as upstream did until its fix for issue #25814. Exits on a failed check.
# Needs python3-numpy and python3-sentencepiece (the caller installs them) and the fixtures.
llama_cpp_setup() {
  local llama=$1 work=$2 fixtures=$3 python=/usr/bin/python3
  if [ ! -d "$fixtures/llava-llama-tiny" ] || [ ! -d "$fixtures/llava-qwen2-tiny" ]; then
    echo "llama_cpp.sh: the LLaVA fixtures are missing from $fixtures (set GLIMPSE_FIXTURES):" \
      "the conversion cannot be checked" >&2
    exit 1
  fi
  cmake -S "$llama" -B "$llama/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$llama/build" -j"$(nproc)" --target llama-bench llama-quantize llama-cli >/dev/null
  g++ -O2 -std=c++17 bench/clip_embed.cpp "$llama/examples/llava/clip.cpp" -I "$llama/examples/llava" \
    -I "$llama/ggml/include" -I "$llama/include" -I "$llama/common" -I "$llama/examples" -o "$work/clip_embed" \
    -L "$llama/build/bin" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$llama/build/bin" -lpthread
  llama_version=${LLAMA_CPP_VERSION:-$(git -C "$llama" rev-parse --short HEAD 2>/dev/null || basename "$llama")}

  # ---- the conversion checked on the fixtures
  "$python" - "$fixtures" "$llama" "$work" <<'PY'
import json, os, struct, subprocess, sys
import numpy as np
fixtures, llama, work = sys.argv[1:]
def tensor(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        start, end = header[name]["data_offsets"]
        f.seek(8 + n + start)
        return np.frombuffer(f.read(end - start), np.float32).reshape(header[name]["shape"])
for name, case in (("llava-llama-tiny", 8), ("llava-qwen2-tiny", 8)):
    out = os.path.join(work, "check-" + name)
    subprocess.run([sys.executable, "bench/llava_gguf.py", os.path.join(fixtures, name), out, llama], check=True,
                   stdout=subprocess.DEVNULL)
    expected = json.load(open(os.path.join(fixtures, name, "expected.json")))["cases"][case]
    answer = subprocess.run([os.path.join(llama, "build/bin/llama-cli"), "-m", os.path.join(out, "text.gguf"),
                             "-p", expected["prompt"], "-n", str(len(expected["greedy"]["new_ids"])), "--temp", "0",
                             "-no-cnv", "-t", "2", "--no-warmup"], capture_output=True).stdout
    answer = answer.decode("utf-8", errors="replace")  # bytes that end no character: U+FFFD, as the reference's decode
    text = expected["greedy"]["text"]
    if text not in answer:
        sys.exit(f"llama.cpp's answer on {name} case {case} is not the reference's {text!r}: {answer!r}")
    print(f"check: llama.cpp on {name} (converted by bench/llava_gguf.py) answers the reference's greedy text")
reference = os.path.join(fixtures, "llava-llama-tiny", "reference.safetensors")
tensor(reference, "pixel_values.1")[0].astype(np.float32).tofile(os.path.join(work, "pixels.f32"))
subprocess.run([os.path.join(work, "clip_embed"), os.path.join(work, "check-llava-llama-tiny", "mmproj.gguf"),
                os.path.join(work, "pixels.f32"), os.path.join(work, "features.f32"), "2", "1"], check=True,
               stdout=subprocess.DEVNULL)
features = np.fromfile(os.path.join(work, "features.f32"), np.float32)
expected = tensor(reference, "image_features.1").reshape(-1)
difference = float(np.abs(features - expected).max()) if features.shape == expected.shape else float("inf")
if not difference <= 5e-3:
    sys.exit(f"llama.cpp's image features on llava-llama-tiny differ from the reference's by {difference}")
print(f"check: llama.cpp's image features on llava-llama-tiny within {difference:.1e} of the reference's "
      "(its patch convolution in float16)")
PY
}
