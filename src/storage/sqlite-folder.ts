import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { StartupError } from '../startup-error.ts';

/**
 * Creates the folder a SQLite file goes in, one level at a time. Not `mkdirSync(…, {recursive})`:
 * on Node 20 that loops for ever (a minute of CPU, then still hanging) under a path the kernel
 * refuses, such as /proc/nope, and a parent that is a file only surfaces as a bare EEXIST.
 */
export function ensureSqliteFolder(file: string): void {
  const folder = dirname(file);
  const missing: string[] = [];
  let existing = folder;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    const up = dirname(existing);
    if (up === existing) break;
    existing = up;
  }
  if (existsSync(existing) && !statSync(existing).isDirectory()) {
    throw new StartupError(
      `database.url: the SQLite file ${file} cannot be created because ${existing} is a file, not a folder; point database.url at a path in a folder (e.g. sqlite:./data/tollgate.db)`,
    );
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new StartupError(
        `database.url: cannot create the folder ${dir} for the SQLite file (${code}); point database.url at a writable folder (e.g. sqlite:./data/tollgate.db)`,
      );
    }
  }
}
