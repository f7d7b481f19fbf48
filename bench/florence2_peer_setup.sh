#!/usr/bin/env bash
# florence2_peer_setup.sh PEER_DIR TRANSFORMERS_GIT HUB_GIT FLORENCE2_GIT — lays out the PyTorch reference for
# Florence-2 (the fixtures' reference setup, ../shared/fixtures/README.md, "Rebuilding the reference") in PEER_DIR,
# outside the repository: nothing of it is committed. Run bench/florence2_torch.py and bench/florence2.sh with
# GLIMPSE_FLORENCE2_PEER=PEER_DIR (default /work/peers/florence2); the Python path they need is PEER_DIR/site.
#
# The three arguments are git checkouts (bare or not) of public repositories, brought in by whatever means
# (a clone, a mirror):
#   TRANSFORMERS_GIT  transformers with upstream's release tags (e.g. tianhua2/my_huggingface): src/transformers
#                     at tag v4.40.2 (TRANSFORMERS_REF to name another ref)
#   HUB_GIT           huggingface/huggingface_hub: src/huggingface_hub at tag v0.23.0 (HUB_REF)
#   FLORENCE2_GIT     a clone of the hub's microsoft/Florence-2-large (e.g. zxyzxy8888/Florence-2-large):
#                     configuration_florence2.py, modeling_florence2.py, processing_florence2.py at commit
#                     00d2f1570b00c6dea5df998f5635db96840436bc (FLORENCE2_REF), made one package, florence2
#                     (importing it so rather than with trust_remote_code: 4.40.2's import check demands flash_attn)
# and it needs Debian 12's python3-torch (1.13.1), -numpy, -pil, -regex, -yaml, -requests, -packaging, -filelock,
# -tqdm, -fsspec, -typing-extensions (installed here when missing). Debian has no tokenizers, safetensors, einops or
# timm: transformers gets the two small changes the fixtures' README lists (tokenizers' import made optional in
# convert_slow_tokenizer.py; the fallback AddedToken of tokenization_utils_base.py given a content-based
# __hash__/__eq__, a __getstate__ that returns a copy and a __setstate__), importlib.metadata finds transformers,
# huggingface-hub and safetensors by dist-info METADATA files, and the stand-ins for safetensors, einops.rearrange
# and timm's DropPath/trunc_normal_ are ours, copied from bench/florence2_peer/.
set -euo pipefail
[ $# -eq 4 ] || { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
peer=$1
transformers_ref=${TRANSFORMERS_REF:-v4.40.2}
hub_ref=${HUB_REF:-v0.23.0}
florence2_ref=${FLORENCE2_REF:-00d2f1570b00c6dea5df998f5635db96840436bc}

packages="python3-torch python3-numpy python3-pil python3-regex python3-yaml python3-requests python3-packaging
  python3-filelock python3-tqdm python3-fsspec python3-typing-extensions"
missing=
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# git_dir CHECKOUT: the git directory of a bare or ordinary checkout
git_dir() {
  if [ -d "$1/.git" ]; then echo "$1/.git"; elif [ -f "$1/HEAD" ] && [ -d "$1/objects" ]; then echo "$1";
  else echo "florence2_peer_setup.sh: $1 is not a git checkout" >&2; exit 1; fi
}
# commit GIT REF: REF's commit, or a clear failure
commit() {
  git --git-dir="$1" rev-parse --verify -q "$2^{commit}" ||
    { echo "florence2_peer_setup.sh: no $2 in $1 (name its commit with the *_REF variables)" >&2; exit 1; }
}
transformers_git=$(git_dir "$2") hub_git=$(git_dir "$3") florence2_git=$(git_dir "$4")
transformers_commit=$(commit "$transformers_git" "$transformers_ref")
hub_commit=$(commit "$hub_git" "$hub_ref")
florence2_commit=$(commit "$florence2_git" "$florence2_ref")

site=$peer/site
rm -rf "$site"
mkdir -p "$site/florence2" "$peer/tmp"
tmp=$(mktemp -d "$peer/tmp/setup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git --git-dir="$transformers_git" archive "$transformers_commit" src/transformers | tar -x -C "$tmp"
git --git-dir="$hub_git" archive "$hub_commit" src/huggingface_hub | tar -x -C "$tmp"
mv "$tmp/src/transformers" "$tmp/src/huggingface_hub" "$site/"
for f in configuration_florence2.py modeling_florence2.py processing_florence2.py; do
  git --git-dir="$florence2_git" show "$florence2_commit:$f" > "$site/florence2/$f"
done
cat > "$site/florence2/__init__.py" <<'EOF'
# Microsoft's Florence-2 remote code (configuration, modeling, processing) as one package.
from .configuration_florence2 import Florence2Config
from .modeling_florence2 import Florence2ForConditionalGeneration
from .processing_florence2 import Florence2Processor
EOF
cp -r "$repo/bench/florence2_peer/safetensors" "$repo/bench/florence2_peer/einops" "$repo/bench/florence2_peer/timm" "$site/"
find "$site" -name __pycache__ -prune -exec rm -rf {} +

# The two changes to transformers, each checked to have applied exactly once.
/usr/bin/python3 - "$site/transformers" <<'PY'
import sys
root = sys.argv[1]

def patch(path, old, new):
    path = f"{root}/{path}"
    text = open(path).read()
    if text.count(old) != 1:
        sys.exit(f"florence2_peer_setup.sh: {path} does not hold the text to change exactly once")
    open(path, "w").write(text.replace(old, new))

patch("convert_slow_tokenizer.py",
      "from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors\n"
      "from tokenizers.models import BPE, Unigram, WordPiece\n",
      "try:  # (florence2 peer: Debian 12 has no tokenizers; only the fast tokenizers' conversions need it)\n"
      "    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors\n"
      "    from tokenizers.models import BPE, Unigram, WordPiece\n"
      "except ImportError:\n"
      "    pass\n")
# Without tokenizers, AddedToken is a dataclass without fields: its generated __eq__ finds any two equal and it
# cannot be hashed; tokenizers' own compares and hashes by content.
patch("tokenization_utils_base.py",
      "        def __getstate__(self):\n"
      "            return self.__dict__\n",
      "        def __getstate__(self):\n"
      "            return dict(self.__dict__)\n"
      "\n"
      "        def __setstate__(self, state):\n"
      "            self.__dict__.update(state)\n"
      "\n"
      "        def __hash__(self):\n"
      "            return hash(self.content)\n"
      "\n"
      "        def __eq__(self, other):\n"
      "            if isinstance(other, AddedToken):\n"
      "                return self.content == other.content\n"
      "            return NotImplemented\n")
PY

# dist-info METADATA, so that importlib.metadata finds the packages that have no installer here
metadata() {
  mkdir -p "$site/$1-$2.dist-info"
  printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$1" "$2" > "$site/$1-$2.dist-info/METADATA"
}
metadata transformers "${transformers_ref#v}"
metadata huggingface_hub "${hub_ref#v}"
metadata safetensors 0.4.3
cat > "$peer/VERSIONS" <<EOF
transformers $transformers_ref $transformers_commit
huggingface_hub $hub_ref $hub_commit
florence2 $florence2_ref $florence2_commit
EOF

# It imports, and the versions are the reference's
PYTHONPATH=$site /usr/bin/python3 -c "
import torch, transformers, huggingface_hub, florence2
print('florence2 peer in $peer: torch', torch.__version__, '| transformers', transformers.__version__,
      '| huggingface_hub', huggingface_hub.__version__)"
