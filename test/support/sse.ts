import assert from 'node:assert/strict';

/**
 * The event blocks of an SSE body as a conforming parser sees them: comment lines (`: …`) are
 * skipped, and a block that held only comments is no event at all.
 */
export function sseBlocks(text: string): string[] {
  return text
    .split('\n\n')
    .map((block) =>
      block
        .split('\n')
        .filter((line) => !line.startsWith(':'))
        .join('\n'),
    )
    .filter(Boolean);
}

const DEPLOYMENT_COMMENT = /^: x-tollgate-deployment (\S+)$/gm;

/** The deployment a stream names in its `: x-tollgate-deployment` comment; null when it names none. */
export function streamedDeployment(text: string): string | null {
  const named = [...text.matchAll(DEPLOYMENT_COMMENT)].map((m) => m[1]!);
  assert.ok(named.length <= 1, `a stream names its deployment once, not ${named.length} times`);
  return named[0] ?? null;
}

/**
 * A chat answer's body and the deployment that served it: a JSON answer's `x-tollgate-deployment`
 * header, or a stream's comment (a stream's headers leave before any deployment answered, so it
 * never has the header). `events`: a stream's `data:` payloads.
 */
export async function readServed(res: Response): Promise<{ deployment: string | null; text: string; events: string[] }> {
  const text = await res.text();
  const streamed = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  if (!streamed) return { deployment: res.headers.get('x-tollgate-deployment'), text, events: [] };
  assert.equal(res.headers.get('x-tollgate-deployment'), null, "a stream's headers leave before any deployment answered");
  const events = sseBlocks(text).flatMap((block) =>
    block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6)),
  );
  return { deployment: streamedDeployment(text), text, events };
}
