import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { llmsTxt } from '../docs/llms-txt.ts';
import { openApiDocument } from '../docs/openapi.ts';

/** GET /openapi.json and GET /llms.txt: the API described for tools and for agents. */
export function docsRoutes(app: FastifyInstance, services: Services): void {
  const publicUrl = services.config.server.publicUrl;
  const document = JSON.stringify(openApiDocument(publicUrl));
  const guide = llmsTxt(publicUrl);
  app.get('/openapi.json', async (_request, reply) => reply.type('application/json').send(document));
  app.get('/llms.txt', async (_request, reply) => reply.type('text/plain; charset=utf-8').send(guide));
}
