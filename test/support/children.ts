// The process helpers live in src/devchain so the demo and the tests share them.
export { stopChild, track, waitForOutput } from '../../src/devchain/processes.ts';
