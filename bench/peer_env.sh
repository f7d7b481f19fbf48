# peer_env.sh — sourced by the benchmark scripts: peer_python, the command that runs the Python peers
# (PyTorch, Pillow, numpy) with OpenBLAS on its best kernels for this CPU. PyTorch's float32 products and
# FAISS's k-means run on Debian's OpenBLAS 0.3.21, which takes its oldest x86-64 kernels on CPUs it does
# not know, such as the AMX Xeons (Sapphire / Emerald Rapids: 38 against 155 GFLOP/s measured); a Haswell
# override set for old OpenBLAS builds slows current ones, so it goes too.
peer_python=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3)
if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
  peer_python=(env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE=SapphireRapids /usr/bin/python3)
fi
