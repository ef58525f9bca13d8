import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

/**
 * Request ids are UUIDv7: time-ordered, so the reservation and usage rows they key append to the
 * end of their indexes instead of dirtying a random index page per request, which halves what each
 * SQLite commit writes. The random part comes from a pool refilled 256 ids at a time, because one
 * crypto call per id showed up in the hot path's profile.
 */
const ID_BYTES = 16;
const pool = Buffer.allocUnsafe(ID_BYTES * 256);
let offset = pool.length;

export function newRequestId(): string {
  if (offset === pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const random = pool.subarray(offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return uuidv7({ random });
}
