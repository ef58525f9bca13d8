import { MODELS } from './chat-harness.ts';

/** An OpenAI-compatible model that takes images, priced like chat-small (`fake/vision-small`). */
export const VISION_MODEL = { ...MODELS[0]!, name: 'vision-small', inputs: ['text', 'image'], partTokenBounds: { image: 1600 } };

/** A 1×1 PNG, base64: the smallest image a tool can hand back. */
export const ONE_PIXEL_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
