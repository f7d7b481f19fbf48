// ort_bench.js — ONNX Runtime (npm onnxruntime-node) on the ONNX exports of
// peers.py, timed like glimpse bench: median over runs after a warm-up.
// Prints JSON Lines in peers.py's format.
//     node bench/ort_bench.js ONNX_DIR THREADS RUNS [STAGE]   (STAGE: only that stage)
const ort = require('onnxruntime-node');
const path = require('path');

async function median(fn, runs) {
  await fn();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await fn();
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return times.length % 2 ? times[(times.length - 1) / 2] : (times[times.length / 2 - 1] + times[times.length / 2]) / 2;
}

async function main() {
  const [dir, threadsText, runsText, only] = process.argv.slice(2);
  const threads = Number(threadsText || 2), runs = Number(runsText || 10);
  const options = { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' };
  const cases = [
    { file: 'vit_b_32.onnx', stage: 'vision', input: 'pixels', shape: [3, 224, 224], batches: [1, 8], flops: 8.82e9 },
    { file: 'text.onnx', stage: 'text', input: 'tokens', shape: [77, 512], batches: [1, 8], flops: 5.96e9 },
    { file: 'vit_b_16_384.onnx', stage: 'vision_blip_384', input: 'pixels', shape: [3, 384, 384], batches: [1], flops: 110.97e9 },
    { file: 'vision_siglip_base_224.onnx', stage: 'vision_siglip_base_224', input: 'pixels', shape: [3, 224, 224], batches: [1], flops: 34.9e9, slow: true },
    { file: 'vision_siglip_so400m_384.onnx', stage: 'vision_siglip_so400m_384', input: 'pixels', shape: [3, 384, 384], batches: [1], flops: 666.4e9, slow: true },
  ];
  for (const c of cases.filter((c) => !only || c.stage === only)) {
    const session = await ort.InferenceSession.create(path.join(dir, c.file), options);
    for (const batch of c.batches) {
      const size = batch * c.shape.reduce((a, b) => a * b, 1);
      const feeds = { [c.input]: new ort.Tensor('float32', new Float32Array(size).map(() => Math.random()), [batch, ...c.shape]) };
      const ms = await median(() => session.run(feeds), c.stage === 'vision_blip_384' || c.slow ? Math.max(3, runs / 3) : runs);
      console.log(JSON.stringify({ runtime: 'onnxruntime', stage: c.stage, batch, threads,
        median_ms: Math.round(ms / batch * 1000) / 1000, gflops: Math.round(c.flops * batch / (ms / 1e3) / 1e8) / 10 }));
    }
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
