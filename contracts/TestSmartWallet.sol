// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

/// @title TestSmartWallet: a minimal ERC-1271 contract wallet for Tollgate's local chain.
/// @notice TEST WALLET, not a production wallet. It stands for the smart-contract wallets users
/// hold (Safe, Coinbase Smart Wallet): it has code, cannot sign itself, and vouches for signatures
/// of its owner key through ERC-1271. The factory deploys it with CREATE2, so its address is known
/// before deployment, which is what ERC-6492 signatures rely on.
contract TestSmartWallet {
    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}

contract TestSmartWalletFactory {
    function deploy(address owner, bytes32 salt) external returns (address) {
        return address(new TestSmartWallet{salt: salt}(owner));
    }

    function walletAddress(address owner, bytes32 salt) external view returns (address) {
        bytes32 codeHash = keccak256(abi.encodePacked(type(TestSmartWallet).creationCode, abi.encode(owner)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, codeHash)))));
    }
}
