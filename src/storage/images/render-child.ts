/**
 * The body of an image render process: takes one job at a time from the pool (pool.ts) and answers
 * with the image, the refusal, or "this belongs to the SVG lane". It holds no secret and opens nothing:
 * its environment is emptied by the pool, and its only input is the job's bytes and parameters.
 */
import { AppError } from '../../errors.ts';
import { configureSharp, NeedsSvgLane, renderImage } from './pipeline.ts';
import type { RenderAnswer, RenderRequest } from './pool.ts';

function reply(answer: RenderAnswer): void {
  process.send?.(answer);
}

async function handle(job: RenderRequest): Promise<void> {
  try {
    const input = Buffer.from(job.input.buffer, job.input.byteOffset, job.input.byteLength);
    const out = await renderImage(input, job.params, job.choice, job.limits);
    reply({
      id: job.id,
      kind: 'done',
      data: out.data,
      format: out.format,
      width: out.width,
      height: out.height,
    });
  } catch (err) {
    if (err instanceof NeedsSvgLane) return reply({ id: job.id, kind: 'reroute' });
    const e =
      err instanceof AppError
        ? err
        : new AppError('IMAGE_CORRUPT', 'The image could not be transformed.', { cause: err });
    reply({ id: job.id, kind: 'failed', code: e.code, message: e.message });
  }
}

// The service went away (ended, or killed): nothing is left to answer to.
process.on('disconnect', () => process.exit(0));
process.on('message', (job: RenderRequest) => {
  void handle(job);
});
configureSharp();
reply({ id: 0, kind: 'ready' });
