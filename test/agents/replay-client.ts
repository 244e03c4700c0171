// Run as a separate process by replay-memory.test.ts: reads one response to its end (or
// until `stopAfter` occurrences of `marker`), keeping nothing but counts, and prints them.
export {};
const [url, key, marker, stopAfter] = process.argv.slice(2);
const res = await fetch(url, { headers: { authorization: `Bearer ${key}`, accept: "text/event-stream, application/json" } });
const pattern = Buffer.from(marker);
let bytes = 0;
let markers = 0;
let carry = Buffer.alloc(0);
let tail = "";
const reader = res.body!.getReader();
for (;;) {
  const { done, value } = await reader.read();
  if (done) break;
  bytes += value.byteLength;
  const chunk = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  // A marker split between two chunks is found in the carried end of the previous one.
  const joined = carry.length ? Buffer.concat([carry, chunk.subarray(0, pattern.length)]) : undefined;
  if (joined) for (let i = joined.indexOf(pattern); i >= 0 && i < carry.length; i = joined.indexOf(pattern, i + 1)) markers++;
  for (let i = chunk.indexOf(pattern); i >= 0; i = chunk.indexOf(pattern, i + 1)) markers++;
  carry = Buffer.from(chunk.subarray(Math.max(0, chunk.length - pattern.length + 1)));
  tail = (tail + chunk.toString("latin1", Math.max(0, chunk.length - 200))).slice(-200);
  if (stopAfter && markers >= Number(stopAfter)) break;
}
await reader.cancel().catch(() => {});
process.stdout.write(JSON.stringify({ status: res.status, bytes, markers, tail }));
process.exit(0);
