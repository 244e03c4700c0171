/**
 * Response headers of every server-sent-event stream the service answers with. No
 * `Connection` header: the server keeps HTTP/1.1 connections alive by default, and
 * HTTP/2 forbids the header.
 */
export const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" } as const;
