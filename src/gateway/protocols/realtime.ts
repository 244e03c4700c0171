import { count, defineProtocol, openaiDetails } from "./spec";
import { openaiErrorEvent } from "./openai-media";
import { unstreamedCodec } from "./unstreamed";

/**
 * The OpenAI Realtime API: `GET /v1/realtime?model=...` upgraded to a WebSocket, whose
 * events are relayed to the provider's own Realtime WebSocket frame by frame, untouched
 * (src/gateway/realtime.ts). Each response is metered from its `response.done` event,
 * whose `response.usage` this codec reads (the Realtime API spells the details
 * `input_token_details` / `output_token_details`, the REST APIs `..._tokens_details`).
 */
export const realtime = defineProtocol({
  name: "realtime",
  label: "realtime",
  route: { kind: "websocket", path: "/v1/realtime" },
  surfaces: [{ prefix: "/v1/realtime" }],
  credentials: "realtime",
  errorFamily: "chat",
  spendLimitStatus: 402,
  passThrough: true,
  codec: unstreamedCodec((json, u) => {
    const usage = json?.response?.usage;
    if (!usage) return;
    u.inputTokens = count(usage.input_tokens);
    u.outputTokens = count(usage.output_tokens);
    openaiDetails(u, usage.input_token_details ?? usage.input_tokens_details, usage.output_token_details ?? usage.output_tokens_details);
  }, openaiErrorEvent),
});
