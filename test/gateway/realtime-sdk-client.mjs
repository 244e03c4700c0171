// The openai SDK's Realtime client (OpenAIRealtimeWS, on the `ws` package) under Node, as
// an application runs it. The SDK always dials wss://; a deployment puts TLS in front of
// the gateway, here `createConnection` hands ws a plain TCP socket to the gateway instead.
// Usage: node realtime-sdk-client.mjs <baseURL> <apiKey> <model>; prints the events as JSON lines.
import net from "node:net";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

const [baseURL, apiKey, model] = process.argv.slice(2);
const { hostname, port } = new URL(baseURL);
const client = new OpenAI({ baseURL, apiKey });
const rt = new OpenAIRealtimeWS({ model, options: { createConnection: () => net.connect(Number(port), hostname) } }, client);
const out = (e) => process.stdout.write(JSON.stringify(e) + "\n");
const timer = setTimeout(() => {
  out({ type: "client.timeout" });
  process.exit(2);
}, 20_000);
rt.on("error", (e) => out({ type: "client.error", message: e.message }));
rt.on("session.created", (e) => {
  out(e);
  rt.send({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text: "Say hello" }] } });
  rt.send({ type: "response.create" });
});
rt.on("response.output_text.delta", (e) => out(e));
rt.on("response.done", (e) => {
  out(e);
  clearTimeout(timer);
  rt.close();
});
rt.socket.on("close", () => process.exit(0));
