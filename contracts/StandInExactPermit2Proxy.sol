// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

// STAND-IN CONTRACT. The x402 exact Permit2 proxy (canonical address
// 0x402085c248EeA27D92E8b30b2C58ed07f9E20001) ships in no npm package: @x402/evm carries only its
// ABI and address. This contract is written by Tollgate against that ABI so the local chain can
// settle Permit2 payments. Permit2 itself, the tokens, the signatures and the nonces are real.
// It is placed at the canonical address with anvil_setCode, in tests and `tollgate demo` only.

import "./StandInPermit2ProxyBase.sol";

contract StandInExactPermit2Proxy is StandInPermit2ProxyBase {
    struct Witness {
        address to;
        uint256 validAfter;
    }

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    error InvalidAmount();

    // Permit2 appends this to "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,
    // uint256 nonce,uint256 deadline," to build the signed type, so it lists the referenced structs.
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";

    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external {
        if (permit.permitted.amount == 0) revert InvalidAmount();
        checkTransfer(owner, witness.to, witness.validAfter);

        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: permit.permitted.amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
        emit Settled();
    }
}
