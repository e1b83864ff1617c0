import { Command, InvalidArgumentError } from 'commander';
import { RETRY_DELAYS_MS } from '../sandbox/deliveries.js';
import { startSandbox } from '../sandbox/server.js';
import { listenForShutdown } from '../shutdownSignal.js';
import { wholeNumberOption } from './wholeNumberOption.js';

/** The longest wait a Node timer holds: past it, it fires after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** A time scale whose longest retry wait a timer still holds. */
const timeScale = (raw: string) => {
  const n = Number(raw);
  const max = MAX_TIMER_MS / Math.max(...RETRY_DELAYS_MS);
  if (!Number.isFinite(n) || n <= 0 || n > max) {
    throw new InvalidArgumentError(`must be a number > 0, at most ${Math.floor(max)}`);
  }
  return n;
};

/**
 * A key a request can present: an empty header reads as no key, a header value loses its
 * surrounding spaces, and a control character cannot be sent at all.
 */
const apiKey = (raw: string) => {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (raw === '' || raw.trim() !== raw || /[\x00-\x1f\x7f]/.test(raw)) {
    throw new InvalidArgumentError('must be non-empty, without surrounding spaces or control characters');
  }
  return raw;
};

interface SandboxFlags {
  port: number;
  host: string;
  seedReviews: number;
  seed: number;
  apiKey?: string;
  timeScale: number;
  allowHttpWebhooks?: boolean;
  surveyDelayMs: number;
  deliveryTimeoutMs: number;
}

/** `review-mirror sandbox`: the emulated platform, until SIGTERM or SIGINT. Takes flags only, no config. */
export function sandboxCommand(): Command {
  return new Command('sandbox')
    .description('serve an emulation of the review platform partner API (plus a /_sandbox control API)')
    .option('--port <port>', 'TCP port (0 picks a free one)', wholeNumberOption(0), 4010)
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--seed-reviews <n>', 'reviews seeded into the first company', wholeNumberOption(0), 0)
    .option('--seed <s>', 'seed of the seeded reviews and fault draws', wholeNumberOption(0), 1)
    .option('--api-key <key>', "the first company's API key (random when omitted)", apiKey)
    .option(
      '--time-scale <f>',
      'multiplies webhook retry waits (0.001: 1 minute becomes 60 ms)',
      timeScale,
      1,
    )
    .option('--allow-http-webhooks', 'accept http://127.0.0.1 and http://localhost webhook URLs')
    .option('--survey-delay-ms <ms>', 'delay before default_survey_url is set', wholeNumberOption(0), 3000)
    .option(
      '--delivery-timeout-ms <ms>',
      'webhook delivery timeout',
      wholeNumberOption(1, MAX_TIMER_MS),
      10_000,
    )
    .action(async (flags: SandboxFlags) => {
      const started = Date.now();
      // Listening before the banner: whoever reads it may signal at once.
      const shutdown = listenForShutdown();
      const sandbox = await startSandbox({
        host: flags.host,
        port: flags.port,
        seedReviews: flags.seedReviews,
        seed: flags.seed,
        timeScale: flags.timeScale,
        allowHttpWebhooks: flags.allowHttpWebhooks ?? false,
        surveyDelayMs: flags.surveyDelayMs,
        deliveryTimeoutMs: flags.deliveryTimeoutMs,
        ...(flags.apiKey === undefined ? {} : { apiKey: flags.apiKey }),
      }).catch((error: unknown) => {
        shutdown.dispose();
        throw error;
      });
      process.stdout.write(
        [
          `sandbox listening on ${sandbox.url} (ready in ${Date.now() - started} ms)`,
          `base_url:   ${sandbox.url}  (partner API at ${sandbox.url}/api/v1/partner)`,
          `api_key:    ${sandbox.apiKey}`,
          `company_id: ${sandbox.companyId}  (${flags.seedReviews} seeded reviews)`,
          `control:    ${sandbox.url}/_sandbox`,
          '',
        ].join('\n'),
      );
      await shutdown.received;
      await sandbox.close();
      process.stdout.write('sandbox stopped\n');
    });
}
