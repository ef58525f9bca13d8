// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.17;

/// @title TetherLikeToken: a test token with Tether USD's transfer semantics.
/// @notice Used only by Tollgate's local chain (tests and `tollgate demo`). Like USDT on Ethereum
/// it has 6 decimals, no EIP-3009 and no EIP-2612, its transfer/transferFrom/approve return
/// nothing (so callers must use a "safe transfer" that tolerates empty return data, as Permit2
/// does), and approve refuses to change a non-zero allowance to another non-zero value.
contract TetherLikeToken {
    string public name;
    string public symbol;
    uint8 public constant decimals = 6;
    uint256 public totalSupply;
    address public owner;

    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_) {
        name = name_;
        symbol = symbol_;
        owner = msg.sender;
    }

    function issue(address to, uint256 amount) external {
        require(msg.sender == owner, "only owner");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 value) external {
        _move(msg.sender, to, value);
    }

    function transferFrom(address from, address to, uint256 value) external {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "allowance");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - value;
        }
        _move(from, to, value);
    }

    function approve(address spender, uint256 value) external {
        // Tether's guard against the approve race: reset to zero before setting a new value.
        require(value == 0 || allowance[msg.sender][spender] == 0, "reset allowance first");
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "zero address");
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
