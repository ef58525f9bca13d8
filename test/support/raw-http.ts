import { connect, type Socket } from 'node:net';

/** A client socket that records everything the server sends and when the server closed it. */
export interface RawClient {
  socket: Socket;
  received(): string;
  /** Resolves when the server has sent a status line (the text so far), or null if it closed first. */
  statusLine(): Promise<string | null>;
  /** Resolves when the connection has closed. */
  closed: Promise<void>;
  isClosed(): boolean;
}

/** Opens a TCP connection to `url` and sends `head` (request line and headers, no body yet). */
export async function rawRequest(url: string, head: string): Promise<RawClient> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  let closed = false;
  socket.on('error', () => undefined); // the server cutting us off is what several tests expect
  const done = new Promise<void>((resolve) => socket.once('close', () => ((closed = true), resolve())));
  socket.on('data', (b: Buffer) => (text += b.toString('latin1')));
  socket.write(head);
  return {
    socket,
    received: () => text,
    closed: done,
    isClosed: () => closed,
    statusLine: () =>
      new Promise((resolve) => {
        const check = () => {
          const line = /^HTTP\/1\.1 \d{3}[^\r]*/.exec(text);
          if (line) return (resolve(line[0]), true);
          if (closed) return (resolve(null), true);
          return false;
        };
        if (check()) return;
        const onData = () => check() && socket.off('data', onData);
        socket.on('data', onData);
        void done.then(() => check());
      }),
  };
}

/** The request line and headers of a JSON POST announcing `contentLength` body bytes. */
export function postHead(path: string, contentLength: number, headers: Record<string, string> = {}): string {
  const lines = [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${contentLength}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}
