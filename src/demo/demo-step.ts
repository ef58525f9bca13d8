/** Thrown when a step does not give the result the demo expects. */
export class DemoStepFailed extends Error {}

/** The demo's own check: a step that got something else stops the demo, naming what. */
export function expect(ok: boolean, problem: string): void {
  if (!ok) throw new DemoStepFailed(problem);
}
