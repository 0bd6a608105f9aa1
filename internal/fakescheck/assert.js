// Small assertions for the suites: a step fails with a message saying
// what the fake answered.
export function expect(cond, what) {
  if (!cond) throw new Error(what);
}

export function equal(got, want, what) {
  if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
