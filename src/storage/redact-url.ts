/**
 * The database URL with its password replaced, for logs and messages: `postgres://u:***@host/db`.
 * A password passed as a query parameter (`?password=`) is hidden as well.
 */
export function redactDatabaseUrl(url: string): string {
  if (url.startsWith('sqlite:')) return url;
  try {
    const u = new URL(withoutPassword(url));
    for (const key of [...u.searchParams.keys()]) if (/pass|secret|token|key/i.test(key)) u.searchParams.set(key, '***');
    return u.toString();
  } catch {
    // Not a URL we can take apart: show only its scheme rather than risk printing a secret.
    return `${url.split(':')[0]}:(unparsable URL)`;
  }
}

/**
 * The password cut from the text itself, from the user's `:` to the last `@`, before any parsing: a
 * password typed without percent-encoding may hold `@ # / ?`, which a URL parser reads as the end of
 * the user part, a fragment or a path, and so would print. A stray `@` later in the URL hides more
 * than the password, never less.
 */
function withoutPassword(url: string): string {
  const start = url.indexOf('://') + 3;
  const at = url.lastIndexOf('@');
  if (start < 3 || at < start) return url;
  const colon = url.indexOf(':', start);
  if (colon < 0 || colon > at) return url;
  return `${url.slice(0, colon)}:***${url.slice(at)}`;
}
