// ort_photos.js — ONNX Runtime (npm onnxruntime-node) over the pixel_values
// bench/photos.py feed writes on stdin (an int32 batch size, then that many
// 3x224x224 float32 pictures), run as they arrive: the Pillow + ONNX Runtime
// pipeline of bench/photos.sh, timed from the start to the last batch.
//     python3 bench/photos.py feed DIR | node bench/ort_photos.js ONNX_FILE THREADS
const ort = require('onnxruntime-node');

async function main() {
  const [file, threadsText] = process.argv.slice(2);
  const start = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(file,
    { intraOpNumThreads: Number(threadsText || 2), interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const picture = 3 * 224 * 224 * 4;
  let pending = Buffer.alloc(0), count = 0;
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
    pending = Buffer.concat([pending, ...chunks.splice(0)]);
    for (;;) {
      if (pending.length < 4) break;
      const batch = pending.readInt32LE(0);
      if (pending.length < 4 + batch * picture) break;
      const floats = new Float32Array(pending.buffer.slice(pending.byteOffset + 4, pending.byteOffset + 4 + batch * picture));
      await session.run({ pixels: new ort.Tensor('float32', floats, [batch, 3, 224, 224]) });
      count += batch;
      pending = pending.subarray(4 + batch * picture);
    }
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ runtime: 'pillow+onnxruntime', pictures: count, seconds: Math.round(seconds * 1000) / 1000,
    pictures_per_s: Math.round(count / seconds * 1000) / 1000 }));
}
main().catch((e) => { console.error(e); process.exit(1); });
