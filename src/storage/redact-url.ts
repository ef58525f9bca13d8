/**
 * The database URL with its password replaced, for logs and messages: `postgres://u:***@host/db`.
 * A password passed as a query parameter (`?password=`) is hidden as well.
 */
export function redactDatabaseUrl(url: string): string {
  if (url.startsWith('sqlite:')) return url;
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    for (const key of [...u.searchParams.keys()]) if (/pass|secret|token|key/i.test(key)) u.searchParams.set(key, '***');
    return u.toString();
  } catch {
    // Not a URL we can take apart: show only its scheme rather than risk printing a secret.
    return `${url.split(':')[0]}:(unparsable URL)`;
  }
}
