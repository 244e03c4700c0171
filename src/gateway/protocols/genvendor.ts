/** google.rpc.Code names of the statuses an in-stream error can carry (generative-vendor protocols). */
export const GENVENDOR_STREAM_STATUS: Readonly<Record<number, string>> = { 502: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED" };
