// The entry of the checkpoint worker thread (checkpoint-thread.ts): imports the module it is given.
// A worker thread does not inherit the parent's TypeScript loader (`node --import tsx` registers it
// on the main thread only), so under tsx (the tests, the bench) the module is TypeScript and tsx is
// registered here first; from dist/ (`npm start`, the built CLI) it is compiled JavaScript and tsx,
// a dev dependency, is never loaded. Plain JavaScript on purpose: it runs before any loader.
import { workerData } from 'node:worker_threads';

if (workerData.module.endsWith('.ts')) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(workerData.module);
