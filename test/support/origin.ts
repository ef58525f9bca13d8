/** The public URL test gateways announce; SIWE proofs in tests are signed for it. */
export const TEST_ORIGIN = 'http://gateway.test';
export const TEST_DOMAIN = 'gateway.test';
