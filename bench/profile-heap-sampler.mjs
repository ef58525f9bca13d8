// Loaded into a `tollgate serve` by bench/profile.ts --heap (node --import): V8's sampling heap
// profiler over the loaded window only, with the objects the young and old collections freed kept
// in the profile, so that it counts every byte the request path allocates, not what is still alive
// at the end. The first SIGUSR2 starts it, the second stops it and writes the profile, with the
// collections seen in between, to $TOLLGATE_HEAP_PROFILE_DIR/<pid>.heapprofile.json.
// Plain JavaScript: the gateway runs compiled code, without tsx.
import { renameSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { PerformanceObserver, constants } from 'node:perf_hooks';

const dir = process.env.TOLLGATE_HEAP_PROFILE_DIR;
// One sample per 16 KB allocated on average (V8's default is 32 KB): tens of thousands of samples over a
// few seconds at saturation, enough to rank sites of a few hundred bytes a request.
const SAMPLING_INTERVAL = 16 * 1024;

const session = new Session();
session.connect();
let started = false;
const gc = { scavenges: 0, scavengeMs: 0, markSweeps: 0, markSweepMs: 0, other: 0, otherMs: 0 };
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = entry.detail?.kind;
    if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      gc.scavenges++;
      gc.scavengeMs += entry.duration;
    } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
      gc.markSweeps++;
      gc.markSweepMs += entry.duration;
    } else {
      gc.other++;
      gc.otherMs += entry.duration;
    }
  }
});

process.on('SIGUSR2', () => {
  if (!started) {
    started = true;
    observer.observe({ entryTypes: ['gc'] });
    session.post('HeapProfiler.startSampling', {
      samplingInterval: SAMPLING_INTERVAL,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    return;
  }
  session.post('HeapProfiler.stopSampling', (err, result) => {
    observer.disconnect();
    const out = join(dir ?? '.', `${process.pid}.heapprofile.json`);
    // Written aside and renamed: the benchmark reads the file as soon as its name appears.
    writeFileSync(`${out}.part`, JSON.stringify(err ? { error: String(err) } : { profile: result.profile, gc, samplingInterval: SAMPLING_INTERVAL }));
    renameSync(`${out}.part`, out);
  });
});
