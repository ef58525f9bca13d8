import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { x402Client } from '@x402/fetch';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { x402UptoPermit2ProxyABI } from '@x402/evm';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { Hex } from 'viem';
import { localFacilitator } from '../../../src/payments/facilitator/local-facilitator.ts';
import { X402_UPTO_PERMIT2_PROXY, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { devChain, USD } from '../../support/topup-harness.ts';

/**
 * The local facilitator settling `upto` with @x402/evm's facilitator code, against the stand-in
 * upto Permit2 proxy on anvil (contracts/StandInUptoPermit2Proxy.sol), paid by the stock upto
 * client scheme: the amount settled is the one the server names, never above the signed maximum,
 * 0 sends nothing, and only the facilitator the payer signed for can send it.
 */
interface UptoAuthorization {
  from: Hex;
  permitted: { token: Hex; amount: string };
  nonce: string;
  deadline: string;
  witness: { to: Hex; facilitator: Hex; validAfter: string };
}

async function setup() {
  const { anvil, chain } = await devChain();
  const [relayer, payTo, payer] = [await chain.newAccount(), await chain.newAccount(), await chain.newAccount({ usdt: 10n * USD })];
  await chain.approvePermit2(payer, chain.usdt);
  const facilitator = localFacilitator({ relayerKey: relayer.privateKey, rpcUrls: { [chain.network]: anvil.rpcUrl }, allowedFactories: [], confirmationTimeoutMs: 10_000 });
  const requirements = (max: bigint, over: Partial<PaymentRequirements> = {}, facilitatorAddress: string = relayer.address): PaymentRequirements => ({
    scheme: 'upto',
    network: chain.network as PaymentRequirements['network'],
    asset: chain.usdt,
    amount: max.toString(),
    payTo: payTo.address,
    maxTimeoutSeconds: 60,
    extra: { facilitatorAddress, name: 'Tether USD', version: '1' },
    ...over,
  });
  // The stock client, registered as @x402/evm's upto client scheme is: no Tollgate code.
  const sign = async (account: FundedAccount, accepted: PaymentRequirements): Promise<PaymentPayload> => {
    const client = new x402Client().register('eip155:*', new UptoEvmScheme(account));
    // Since 2.27 the client refuses tokens it does not know unless told (as topup-harness.ts does).
    client.setSpendControls({ allowedAssets: [{ network: chain.network, asset: chain.usdt, maxAmountPerPayment: '10000000000' }] });
    return client.createPaymentPayload({ x402Version: 2, resource: { url: 'http://gateway.test/v1/chat/completions', description: 'chat', mimeType: 'application/json' }, accepts: [accepted] });
  };
  // The proxy called directly, as `from` (simulated: nothing is sent), with the package's own settle arguments.
  const callProxy = (from: FundedAccount, payload: PaymentPayload, amount: bigint) => {
    const { signature, permit2Authorization: a } = payload.payload as { signature: Hex; permit2Authorization: UptoAuthorization };
    const permit = { permitted: { token: a.permitted.token, amount: BigInt(a.permitted.amount) }, nonce: BigInt(a.nonce), deadline: BigInt(a.deadline) };
    const witness = { to: a.witness.to, facilitator: a.witness.facilitator, validAfter: BigInt(a.witness.validAfter) };
    return chain.client(from).simulateContract({ address: X402_UPTO_PERMIT2_PROXY, abi: x402UptoPermit2ProxyABI, functionName: 'settle', args: [permit, amount, a.from, witness, signature] });
  };
  const balance = (who: string) => chain.balanceOf(chain.usdt, who as `0x${string}`);
  const blockNumber = () => chain.client(relayer).getBlockNumber();
  return { anvil, chain, relayer, payTo, payer, facilitator, requirements, sign, callProxy, balance, blockNumber };
}

describe('upto through the local facilitator', () => {
  test('the facilitator names itself in the requirements, verifies the maximum and settles exactly the charge', async () => {
    const s = await setup();
    const supported = await s.facilitator.supported();
    assert.ok(supported.kinds.some((k) => k.scheme === 'upto' && k.network === s.chain.network), 'the local facilitator supports upto');
    const accepted = s.requirements(500_000n);
    const payload = await s.sign(s.payer, accepted);
    const verified = await s.facilitator.verify(payload, accepted);
    assert.equal(verified.isValid, true, verified.invalidReason);
    const before = await s.balance(s.payTo.address);
    const settled = await s.facilitator.settle(payload, { ...accepted, amount: '123456' });
    assert.equal(settled.success, true, settled.errorReason);
    assert.match(settled.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal((await s.balance(s.payTo.address)) - before, 123_456n, 'exactly the charge arrived, not the maximum');
    assert.equal(await s.balance(s.payer.address), 10n * USD - 123_456n);
  });

  test('a charge of 0 settles with no transaction and moves nothing', async () => {
    const s = await setup();
    const accepted = s.requirements(500_000n);
    const payload = await s.sign(s.payer, accepted);
    const block = await s.blockNumber();
    const settled = await s.facilitator.settle(payload, { ...accepted, amount: '0' });
    assert.equal(settled.success, true);
    assert.equal(settled.transaction, '');
    assert.equal(await s.blockNumber(), block, 'no transaction was mined');
    assert.equal(await s.balance(s.payer.address), 10n * USD);
  });
});

describe('attack: upto settlement', () => {
  test('a witness bound to another facilitator is refused at verify, and the proxy refuses any sender but the bound one', async () => {
    const s = await setup();
    const other = await s.chain.newAccount();
    const accepted = s.requirements(500_000n, {}, other.address);
    const payload = await s.sign(s.payer, accepted);
    const verified = await s.facilitator.verify(payload, accepted);
    assert.equal(verified.isValid, false);
    const settled = await s.facilitator.settle(payload, { ...accepted, amount: '1000' });
    assert.equal(settled.success, false, 'the relayer will not send what it is not bound to');
    // Sent straight to the proxy by a relayer that is not the witness's facilitator: reverts.
    await assert.rejects(s.callProxy(s.relayer, payload, 1000n), /UnauthorizedFacilitator/);
    assert.equal(await s.balance(s.payer.address), 10n * USD);
  });

  test('a witness whose recipient is not payTo is refused at verify', async () => {
    const s = await setup();
    const thief = await s.chain.newAccount();
    const signedFor = s.requirements(500_000n, { payTo: thief.address });
    const payload = await s.sign(s.payer, signedFor);
    const verified = await s.facilitator.verify(payload, s.requirements(500_000n));
    assert.equal(verified.isValid, false);
  });

  test('an amount above the signed maximum is never settled, by the facilitator or the proxy', async () => {
    const s = await setup();
    const accepted = s.requirements(500_000n);
    const payload = await s.sign(s.payer, accepted);
    const settled = await s.facilitator.settle(payload, { ...accepted, amount: '500001' });
    assert.equal(settled.success, false);
    // The bound facilitator itself, straight to the proxy: above the maximum reverts.
    await assert.rejects(s.callProxy(s.relayer, payload, 500_001n), /AmountExceedsPermitted/);
    await s.callProxy(s.relayer, payload, 500_000n); // the maximum itself would go through
    assert.equal(await s.balance(s.payer.address), 10n * USD);
  });

  test('an authorization at or past its deadline is refused at verify and at settle', async () => {
    const s = await setup();
    // Signed by the stock client with a deadline 2 s away; by the time the settle could land, it is gone.
    const accepted = s.requirements(500_000n, { maxTimeoutSeconds: 2 });
    const payload = await s.sign(s.payer, accepted);
    await new Promise((r) => setTimeout(r, 2_100));
    const verified = await s.facilitator.verify(payload, accepted);
    assert.equal(verified.isValid, false);
    assert.match(String(verified.invalidReason), /deadline|expired/);
    const settled = await s.facilitator.settle(payload, { ...accepted, amount: '1000' });
    assert.equal(settled.success, false);
    assert.equal(await s.balance(s.payer.address), 10n * USD);
  });

  test('a replay of a settled authorization moves nothing more (Permit2 nonce spent)', async () => {
    const s = await setup();
    const accepted = s.requirements(500_000n);
    const payload = await s.sign(s.payer, accepted);
    assert.equal((await s.facilitator.settle(payload, { ...accepted, amount: '1000' })).success, true);
    const again = await s.facilitator.settle(payload, { ...accepted, amount: '1000' }).catch((err: unknown) => ({ success: false, errorReason: String(err) }));
    assert.equal(again.success, false);
    assert.equal(await s.balance(s.payer.address), 10n * USD - 1000n);
  });
});
