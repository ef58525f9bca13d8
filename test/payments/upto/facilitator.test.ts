import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { x402UptoPermit2ProxyABI } from '@x402/evm';
import type { PaymentPayload } from '@x402/core/types';
import type { Hex } from 'viem';
import { X402_UPTO_PERMIT2_PROXY, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { USD } from '../../support/topup-harness.ts';
import { uptoSetup } from './upto-setup.ts';

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
  const s = await uptoSetup();
  const { chain, relayer } = s;
  // The proxy called directly, as `from` (simulated: nothing is sent), with the package's own settle arguments.
  const callProxy = (from: FundedAccount, payload: PaymentPayload, amount: bigint) => {
    const { signature, permit2Authorization: a } = payload.payload as { signature: Hex; permit2Authorization: UptoAuthorization };
    const permit = { permitted: { token: a.permitted.token, amount: BigInt(a.permitted.amount) }, nonce: BigInt(a.nonce), deadline: BigInt(a.deadline) };
    const witness = { to: a.witness.to, facilitator: a.witness.facilitator, validAfter: BigInt(a.witness.validAfter) };
    return chain.client(from).simulateContract({
      address: X402_UPTO_PERMIT2_PROXY,
      abi: x402UptoPermit2ProxyABI,
      functionName: 'settle',
      args: [permit, amount, a.from, witness, signature],
    });
  };
  const blockNumber = () => chain.client(relayer).getBlockNumber();
  return { ...s, callProxy, blockNumber };
}

describe('upto through the local facilitator', () => {
  test('the facilitator names itself in the requirements, verifies the maximum and settles exactly the charge', async () => {
    const s = await setup();
    const supported = await s.facilitator.supported();
    assert.ok(
      supported.kinds.some((k) => k.scheme === 'upto' && k.network === s.chain.network),
      'the local facilitator supports upto',
    );
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
