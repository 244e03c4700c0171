import { createHmac, randomBytes } from "node:crypto";

/** `whsec_` + 32 random bytes in base64: the Standard Webhooks secret format. */
export function generateSecret(): string {
  return "whsec_" + randomBytes(32).toString("base64");
}

/** Spec `X-Signature`: lowercase hex HMAC-SHA256 of the raw body, keyed by the UTF-8 bytes of the whole secret. */
export function xSignature(secret: string, body: Uint8Array): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

/**
 * The Standard Webhooks key: the base64 part of a `whsec_<base64>` secret decoded (what
 * generated secrets look like); for any other client-supplied secret its raw UTF-8
 * bytes (receivers then use the library's `format: "raw"`).
 */
export function standardKey(secret: string): Buffer {
  const b64 = secret.startsWith("whsec_") ? secret.slice(6) : undefined;
  if (b64 && /^[A-Za-z0-9+/]+={0,2}$/.test(b64) && b64.length % 4 === 0) return Buffer.from(b64, "base64");
  return Buffer.from(secret, "utf8");
}

/**
 * Headers of one delivery attempt. Besides the spec's X-Event-ID/X-Signature, the
 * Standard Webhooks headers sign id + timestamp + body, so a receiver can reject a
 * replayed request (the spec's scheme signs the body only).
 */
export function deliveryHeaders(secret: string, eventId: string, body: Uint8Array, now = Date.now()): Record<string, string> {
  const timestamp = Math.floor(now / 1000).toString();
  const signed = createHmac("sha256", standardKey(secret))
    .update(`${eventId}.${timestamp}.`)
    .update(body)
    .digest("base64");
  return {
    "content-type": "application/json",
    "user-agent": "gateway-webhooks/1",
    "x-event-id": eventId,
    "x-signature": xSignature(secret, body),
    "webhook-id": eventId,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${signed}`,
  };
}
