/**
 * TEST ONLY fail points. They are not configuration: they come from the environment of the
 * `tollgate serve` process (read once at start-up, src/main.ts), so no config file can switch them
 * on, and in-process tests set them on the running gateway's `services.failPoints`.
 * `TOLLGATE_TEST_HANG_BEFORE_BROADCAST=1`: a top-up stops for good after it is recorded and
 * verified, before its settlement is sent, so a test can kill -9 the process at exactly that step.
 * `TOLLGATE_TEST_SETTLE_FAILURE=outage`: every settle (and spool replay) fails as if the database
 * did not answer, so settles are spooled; `=crash`: the same, and the request then stops for good
 * right after its settle is spooled, so a test can kill -9 the process there.
 * `TOLLGATE_TEST_RETENTION_FAILURE=after-export`: a retention batch stops after its export file is
 * written and before its rows are deleted, as a crash there would leave it.
 * `TOLLGATE_TEST_CHECKPOINT_FAILURE=before-store`: a pass of the ledger-check checkpoint job stops
 * after its check passed and before its checkpoint is stored, as a crash there would leave it.
 * `TOLLGATE_TEST_CHANNEL_FAILURE=stop-before-commit`: a batch-settlement request answers and then
 * stops for good before its channel is committed (no commit, no lease renewal or release), as a
 * crash between the answer and the commit would leave it.
 */
export type SettleFailure = 'outage' | 'crash' | null;

export interface FailPoints {
  hangBeforeBroadcast: boolean;
  settleFailure: SettleFailure;
  retentionFailure: 'after-export' | null;
  channelFailure: 'stop-before-commit' | null;
  checkpointFailure?: 'before-store' | null;
}

/** All off: what every gateway runs with unless a test asks otherwise. A new object each time, since tests change it. */
export function noFailPoints(): FailPoints {
  return { hangBeforeBroadcast: false, settleFailure: null, retentionFailure: null, channelFailure: null };
}

export function failPointsFromEnv(env: NodeJS.ProcessEnv): FailPoints {
  const settle = env.TOLLGATE_TEST_SETTLE_FAILURE;
  return {
    hangBeforeBroadcast: env.TOLLGATE_TEST_HANG_BEFORE_BROADCAST === '1',
    settleFailure: settle === 'outage' || settle === 'crash' ? settle : null,
    retentionFailure: env.TOLLGATE_TEST_RETENTION_FAILURE === 'after-export' ? 'after-export' : null,
    channelFailure: env.TOLLGATE_TEST_CHANNEL_FAILURE === 'stop-before-commit' ? 'stop-before-commit' : null,
    checkpointFailure: env.TOLLGATE_TEST_CHECKPOINT_FAILURE === 'before-store' ? 'before-store' : null,
  };
}
