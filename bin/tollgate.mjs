#!/usr/bin/env node
// The `tollgate` command: runs the compiled JavaScript in dist/ (scripts/build.mjs makes it from src/),
// so no TypeScript is compiled at start. In a checkout (scripts/ and src/ present) a source newer than
// the last build is rebuilt first, so `npm start` and the CLI always run what is in src/; an install
// without them (a Docker image) only runs dist/.
import { existsSync } from 'node:fs';

const build = new URL('../scripts/build.mjs', import.meta.url);
if (existsSync(build) && existsSync(new URL('../src/', import.meta.url))) {
  const { buildIfStale } = await import(build.href);
  try {
    if (await buildIfStale({ quiet: true })) process.stderr.write('tollgate: src/ changed since the last build; rebuilt dist/\n');
  } catch (err) {
    process.stderr.write(`tollgate: ${err.message}\n`);
    if (!existsSync(new URL('../dist/cli/main.js', import.meta.url))) process.exit(2);
  }
}
await import('../dist/cli/main.js');
