// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

// STAND-IN CONTRACT. The x402 upto Permit2 proxy (canonical address
// 0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002) ships in no npm package: @x402/evm carries only its
// ABI and address. This contract is written by Tollgate from the x402 upto EVM scheme (a Permit2
// witness transfer of any amount up to the signed maximum, to the witness's recipient, sent only by
// the witness's facilitator) so the local chain can settle `upto` payments. Permit2 itself, the
// tokens, the signatures and the nonces are real. It is placed at the canonical address with
// anvil_setCode, in tests and `tollgate demo` only. The EIP-2612 entry (settleWithPermit) is left
// out: Tollgate's payers approve Permit2 themselves. Its errors are the ones the package's ABI
// names (no InvalidAmount: an amount of 0 is never sent, @x402/evm settles 0 without a transaction).

import "./StandInPermit2ProxyBase.sol";

contract StandInUptoPermit2Proxy is StandInPermit2ProxyBase {
    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    // Permit2 appends this to "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,
    // uint256 nonce,uint256 deadline," to build the signed type, so it lists the referenced structs.
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";

    error UnauthorizedFacilitator();
    error AmountExceedsPermitted();

    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external {
        checkTransfer(owner, witness.to, witness.validAfter);
        // The facilitator the payer signed for is the only sender: nobody else may choose the amount.
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();

        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
        emit Settled();
    }
}
