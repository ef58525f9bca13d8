import type { Config } from './config/schema.ts';
import { siwxConfigProblem } from './siwe/siwx.ts';
import { UPTO_SETTLE_MARGIN_SECONDS } from './payments/upto/admission.ts';

/**
 * Configurations that start but cannot do what they look like they do, each said once at start-up
 * as a warning naming the settings involved. Not refusals: a gateway with an empty catalog still
 * serves top-ups and keys while its operator writes the models, and one whose sign-in-with-x cannot
 * work still takes payments.
 */
export interface StartupWarning {
  /** The settings to look at, as they are written in the file. */
  settings: string[];
  message: string;
}

export function startupWarnings(config: Config): StartupWarning[] {
  return [...catalogWarnings(config), ...siwxWarnings(config), ...uptoWarnings(config)];
}

/**
 * An upto request answered whole is admitted only with room for its whole answer before the cut that
 * leaves time for its settle (src/payments/upto/admission.ts): with a first-byte timeout longer than
 * that room, every such request the stock client signs is refused, and signing again cannot help.
 */
function uptoWarnings(config: Config): StartupWarning[] {
  if (!config.payPerRequest.enabled || !config.payPerRequest.upto) return [];
  const room = config.topup.maxTimeoutSeconds - config.topup.settleWaitSeconds - config.chat.drainTimeoutSeconds - UPTO_SETTLE_MARGIN_SECONDS;
  if (room >= config.chat.firstByteTimeoutSeconds) return [];
  return [
    {
      settings: ['topup.maxTimeoutSeconds', 'chat.firstByteTimeoutSeconds', 'topup.settleWaitSeconds', 'chat.drainTimeoutSeconds'],
      message:
        `upto requests that are not streamed will all be refused (402 PAYMENT_EXPIRED): an upto authorization leaves them ${room} s to run ` +
        `(topup.maxTimeoutSeconds − topup.settleWaitSeconds − chat.drainTimeoutSeconds − ${UPTO_SETTLE_MARGIN_SECONDS} s), less than the ` +
        `${config.chat.firstByteTimeoutSeconds} s a whole answer may take (chat.firstByteTimeoutSeconds). Raise topup.maxTimeoutSeconds to at least ` +
        `${config.chat.firstByteTimeoutSeconds + config.topup.maxTimeoutSeconds - room} or lower chat.firstByteTimeoutSeconds; streamed upto requests are not affected`,
    },
  ];
}

/**
 * A `providers:` section replaces the built-in one, and with it the built-in catalog: the built-in
 * models are OpenAI's, at OpenAI's list prices, and serving them from another server (the usual
 * reason to write `providers:`) would bill prices the operator never chose for models it may not
 * have. So the catalog is exactly `models:`, and an empty one is said loudly.
 */
function catalogWarnings(config: Config): StartupWarning[] {
  const providers = Object.keys(config.providers);
  if (config.models.length === 0) {
    const example = providers[0] ?? 'openai';
    return [
      {
        settings: ['providers', 'models'],
        message:
          `NO MODELS ARE SERVED: the configuration lists no models, so GET /v1/models is empty and every chat is refused (400 unknown model). ` +
          `A providers: section replaces the built-in catalog; list what each provider serves under models:, e.g. ` +
          `models: [{provider: ${example}, name: <model id the provider serves>, contextLength: 32768, promptCostPer1M: "0.1", completionCostPer1M: "0.2"}] ` +
          `(see tollgate.example.yaml)`,
      },
    ];
  }
  const used = new Set(config.models.flatMap((m) => [m.provider, ...(m.fallbacks ?? []).map((f) => f.provider)]));
  return providers
    .filter((p) => !used.has(p))
    .map((p) => ({
      settings: [`providers.${p}`, 'models'],
      message:
        `provider ${p} serves no model: no entry of models: (nor any fallbacks:) names it, so nothing is sent to it; ` +
        'add its models under models: or remove it',
    }));
}

function siwxWarnings(config: Config): StartupWarning[] {
  const problem = siwxConfigProblem(config.server.publicUrl, config.siwe);
  return problem ? [{ settings: ['server.publicUrl', ...problem.settings], message: problem.message }] : [];
}
