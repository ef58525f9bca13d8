/** A 20-byte EVM address as text: 0x and 40 hex digits, any case. */
export const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;
