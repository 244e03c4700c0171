/**
 * The error a promise rejects with (fails the test when it resolves). Use it instead of
 * `expect(promise).rejects` for anything that waits on the embedded database's thread:
 * bun:test waits for a pending promise handed to `expect` without delivering messages
 * from other threads, so such a promise never settles there.
 */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
  throw new Error("expected the promise to reject; it resolved");
}
