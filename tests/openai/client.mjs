// client.mjs BASE_URL FIXTURES — OpenAI's npm client against glimpse serve's /v1/chat/completions, checked
// against the fixtures' reference answers: llava-llama-tiny case 1 (a picture and a question, greedy, 20 tokens)
// and llava-qwen2-tiny case 9 (two pictures), each whole and streamed; a second turn that continues the first
// (the server keeps the first turn's cache); BLIP-2's question prompt; the models listed; the errors the client
// raises for a bad picture, a web URL and an unknown model; a local picture inside the folder the server allows,
// and 403 outside it; a client leaving in the middle of a stream.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, fixtures] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
const expected = (name) => JSON.parse(readFileSync(`${fixtures}/${name}/expected.json`, "utf8"));
const picture = (file) => ({
  type: "image_url",
  image_url: { url: `data:image/${file.endsWith(".png") ? "png" : "jpeg"};base64,` +
                    readFileSync(`${fixtures}/images/${file}`).toString("base64") },
});

// One request whole and streamed: the same words, the reference's, and usage as the reference counts.
async function both(model, messages, reference, what) {
  const request = { model, messages, max_tokens: 20, temperature: 0 };
  const whole = await client.chat.completions.create(request);
  assert.equal(whole.object, "chat.completion");
  assert.equal(whole.choices[0].message.role, "assistant");
  assert.equal(whole.choices[0].message.content, reference.text, `${what}: the answer`);
  assert.equal(whole.usage.completion_tokens, reference.new_ids.length, `${what}: completion tokens`);
  assert.equal(whole.choices[0].finish_reason, reference.stopped_on_eos ? "stop" : "length");
  const stream = await client.chat.completions.create({ ...request, stream: true,
                                                        stream_options: { include_usage: true } });
  let text = "", chunks = 0, finish = null, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    text += chunk.choices[0].delta.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
    chunks++;
  }
  assert.equal(text, reference.text, `${what}: the streamed answer`);
  assert.ok(chunks > 3, `${what}: the words came in ${chunks} chunks`);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
  console.log(`${what}: ${JSON.stringify(text)} whole and in ${chunks} chunks`);
  return whole;
}

const listed = [];
for await (const model of client.models.list()) listed.push(model.id);
assert.deepEqual(listed, ["llava-llama-tiny", "llava-qwen2-tiny", "blip2-opt-tiny"]);

const llama = expected("llava-llama-tiny").cases[1];
const question = [{ role: "user", content: [picture("astronaut.png"), { type: "text", text: "What color is the cup?" }] }];
const first = await both("llava-llama-tiny", question, llama.greedy, "llava-llama-tiny case 1");
assert.equal(first.usage.prompt_tokens, llama.merged_length);

const qwen = expected("llava-qwen2-tiny").cases[9];
await both("llava-qwen2-tiny", [{ role: "user", content: [picture("astronaut.png"), picture("rocket.jpg"),
  { type: "text", text: "What is the difference between these two images?" }] }], qwen.greedy,
  "llava-qwen2-tiny case 9");

// a second turn: the answer, then a question; the first turn's positions come from the server's cache
const second = await client.chat.completions.create({ model: "llava-llama-tiny", max_tokens: 8, temperature: 0,
  messages: [...question, { role: "assistant", content: first.choices[0].message.content },
             { role: "user", content: "Describe the image in one sentence." }] });
assert.ok(second.usage.prompt_tokens_details.cached_tokens >= llama.merged_length - 1,
          `the second turn kept ${second.usage.prompt_tokens_details.cached_tokens} positions`);
console.log(`second turn: ${second.usage.prompt_tokens_details.cached_tokens} of ${second.usage.prompt_tokens} ` +
            "prompt positions from the cache");

// BLIP-2: "Question: what is in the picture? Answer:" (the fixture's case 2, 13 new tokens)
const blip2 = expected("blip2-opt-tiny").cases[2];
const answer = await client.chat.completions.create({ model: "blip2-opt-tiny", max_tokens: 13, temperature: 0,
  messages: [{ role: "user", content: [picture("astronaut.png"), { type: "text", text: "what is in the picture?" }] }] });
assert.equal(answer.choices[0].message.content, blip2.caption);
console.log(`blip2-opt-tiny: ${JSON.stringify(answer.choices[0].message.content)}`);

// errors come back as the client's APIError with the status
await assert.rejects(client.chat.completions.create({ model: "llava-llama-tiny", messages: [{ role: "user",
  content: [{ type: "image_url", image_url: { url: "data:image/png;base64,bm90IGEgcGljdHVyZQ==" } }] }] }),
  (e) => e.status === 400 && /not an image/.test(e.message));
await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user",
  content: "hello" }] }), (e) => e.status === 404);
await assert.rejects(client.chat.completions.create({ model: "llava-llama-tiny", messages: [{ role: "user",
  content: [{ type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }] }] }),
  (e) => e.status === 400 && /fetches nothing/.test(e.message));
console.log("errors: 400 for a non-picture and a web URL, 404 for an unknown model");

// a local picture, only inside the folder the server allows (--allow-local-images FIXTURES/images)
const local = await client.chat.completions.create({ model: "llava-llama-tiny", max_tokens: 20, temperature: 0,
  messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `file://${fixtures}/images/astronaut.png` } },
                                       { type: "text", text: "What color is the cup?" }] }] });
assert.equal(local.choices[0].message.content, llama.greedy.text);
await assert.rejects(client.chat.completions.create({ model: "llava-llama-tiny", messages: [{ role: "user",
  content: [{ type: "image_url", image_url: { url: `file://${fixtures}/images/../llava-llama-tiny/config.json` } }] }] }),
  (e) => e.status === 403);
console.log("local pictures: read inside the allowed folder, 403 outside it");

// a client that leaves in the middle of a stream: the server stops that answer and goes on answering others
const leaving = await client.chat.completions.create({ model: "llava-llama-tiny", max_tokens: 200, temperature: 0,
  stream: true, messages: question });
for await (const chunk of leaving) {
  if (chunk.choices[0]?.delta?.content) break; // leaves the loop: the client closes the connection
}
const after = await client.chat.completions.create({ model: "llava-llama-tiny", max_tokens: 20, temperature: 0,
  messages: question });
assert.equal(after.choices[0].message.content, llama.greedy.text);
console.log("a client that left mid-stream: the next answer is still the reference's");
