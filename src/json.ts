/** The JSON in `text`, or undefined when it is empty or not JSON (an error page, a cut body, a bad event). */
export function parseJsonLoosely(text: string): any {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}
