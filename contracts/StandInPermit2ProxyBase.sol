// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

// Shared by Tollgate's STAND-IN x402 Permit2 proxies (StandInExactPermit2Proxy.sol,
// StandInUptoPermit2Proxy.sol): Permit2's signature-transfer interface, its canonical address, and
// the checks both proxies make before asking Permit2 to move the payer's tokens.

interface ISignatureTransfer {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

abstract contract StandInPermit2ProxyBase {
    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    event Settled();

    error InvalidDestination();
    error InvalidOwner();
    error PaymentTooEarly();

    function checkTransfer(address owner, address to, uint256 validAfter) internal view {
        if (owner == address(0)) revert InvalidOwner();
        if (to == address(0)) revert InvalidDestination();
        if (block.timestamp < validAfter) revert PaymentTooEarly();
    }
}
