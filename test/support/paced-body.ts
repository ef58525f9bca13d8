/**
 * A request body of `size` bytes (`a`s) sent in `piece`-byte pieces `gapMs` apart, as a slow uploader
 * sends it: an early answer (401, 413) then always comes while the client is still sending.
 */
export function pacedBody(size: number, piece = 256 * 1024, gapMs = 5): ReadableStream<Uint8Array> {
  const bytes = new Uint8Array(piece).fill(0x61);
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      if (sent >= size) return controller.close();
      await new Promise((r) => setTimeout(r, gapMs));
      controller.enqueue(bytes);
      sent += bytes.length;
    },
  });
}
