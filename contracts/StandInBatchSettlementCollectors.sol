// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

// STAND-IN CONTRACTS. The x402 batch-settlement deposit collectors (canonical addresses
// ERC3009DepositCollector 0x4020806089470a89826cB9fB1f4059150b550004 and Permit2DepositCollector
// 0x4020425FAf3B746C082C2f942b4E5159887B0005, from the scheme's EVM spec) ship in no npm package:
// @x402/evm only names them. Written by Tollgate from what @x402/evm signs and sends: the payer
// authorizes the COLLECTOR as recipient (ERC-3009 `to`, Permit2 `spender`), bound to the channel
// (ERC-3009 nonce = keccak256(channelId, salt); Permit2 witness DepositWitness(bytes32 channelId)),
// and the facilitator passes the collector's address and its `collectorData` to
// x402BatchSettlement.deposit. How the settlement contract calls a collector is not published;
// here it is `collect` below, callable by the settlement contract only, which then checks that
// exactly `amount` arrived. Placed at the canonical addresses with anvil_setCode, in tests and
// `tollgate demo` only. The tokens, Permit2, the signatures and the nonces are real.

import {ISignatureTransfer} from "./StandInPermit2ProxyBase.sol";

/// What the stand-in x402BatchSettlement asks of a deposit collector: move `amount` of `token` from
/// `payer` to the caller, under the payer's authorization in `data`, bound to `channelId`.
interface IStandInDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external;
}

interface IERC3009Receive {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
}

interface IERC2612Permit {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;
}

error TokenTransferFailed();

/// ERC-20 transfer that accepts tokens returning nothing (Tether) as well as `true`.
function safeTransfer(address token, address to, uint256 amount) {
    (bool ok, bytes memory ret) = token.call(abi.encodeWithSelector(0xa9059cbb, to, amount));
    if (!ok || (ret.length != 0 && !abi.decode(ret, (bool)))) revert TokenTransferFailed();
}

abstract contract StandInCollectorBase {
    address internal constant BATCH_SETTLEMENT = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    error OnlyBatchSettlement();

    // Anyone else calling a collector with a payer's authorization would move the payer's tokens
    // into the settlement contract without crediting a channel.
    modifier onlyBatchSettlement() {
        if (msg.sender != BATCH_SETTLEMENT) revert OnlyBatchSettlement();
        _;
    }
}

/// `collectorData` = abi.encode(uint256 validAfter, uint256 validBefore, uint256 salt, bytes signature).
contract StandInErc3009DepositCollector is StandInCollectorBase, IStandInDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external onlyBatchSettlement {
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) = abi.decode(data, (uint256, uint256, uint256, bytes));
        // The token refuses a nonce it has seen: one deposit per authorization.
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(payer, address(this), amount, validAfter, validBefore, nonce, signature);
        safeTransfer(token, msg.sender, amount);
    }
}

/// `collectorData` = abi.encode(uint256 nonce, uint256 deadline, bytes permit2Signature, bytes eip2612Permit),
/// eip2612Permit empty or abi.encode(uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s).
contract StandInPermit2DepositCollector is StandInCollectorBase, IStandInDepositCollector {
    struct Eip2612Permit {
        uint256 value;
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    ISignatureTransfer internal constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);
    bytes32 internal constant DEPOSIT_WITNESS_TYPEHASH = keccak256("DepositWitness(bytes32 channelId)");
    // Permit2 appends this to "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,
    // uint256 nonce,uint256 deadline," to build the signed type.
    string internal constant WITNESS_TYPE_STRING = "DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)";

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external onlyBatchSettlement {
        (uint256 nonce, uint256 deadline, bytes memory signature, bytes memory eip2612Permit) = abi.decode(data, (uint256, uint256, bytes, bytes));
        if (eip2612Permit.length != 0) tryEip2612Permit(payer, token, eip2612Permit);
        ISignatureTransfer.PermitTransferFrom memory permit = ISignatureTransfer.PermitTransferFrom({
            permitted: ISignatureTransfer.TokenPermissions({token: token, amount: amount}),
            nonce: nonce,
            deadline: deadline
        });
        pull(permit, payer, channelId, signature);
    }

    function pull(ISignatureTransfer.PermitTransferFrom memory permit, address payer, bytes32 channelId, bytes memory signature) private {
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: msg.sender, requestedAmount: permit.permitted.amount}),
            payer,
            keccak256(abi.encode(DEPOSIT_WITNESS_TYPEHASH, channelId)),
            WITNESS_TYPE_STRING,
            signature
        );
    }

    // The payer's EIP-2612 permit for Permit2 may already have been used (someone sent it first):
    // the Permit2 transfer below is what must succeed, so a failed permit is not an error here.
    function tryEip2612Permit(address payer, address token, bytes memory data) private {
        Eip2612Permit memory p = abi.decode(data, (Eip2612Permit));
        try IERC2612Permit(token).permit(payer, address(PERMIT2), p.value, p.deadline, p.v, p.r, p.s) {} catch {}
    }
}
