#!/usr/bin/env node
// The `tollgate` command. The sources are TypeScript run through tsx's loader, so there is no build
// step to forget and `npm start` always runs what is in src/.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
